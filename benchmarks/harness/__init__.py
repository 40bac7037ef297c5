"""What several groups of scripts share: starting and pinning brokers (`brokers`), the
side-by-side scenarios and one `mqttq bench` run (`scenarios`), and the page and machine
the reports are written for (`page`). Nothing here runs on its own."""
