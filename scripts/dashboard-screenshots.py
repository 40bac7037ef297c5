#!/usr/bin/env python3
"""Screenshots of the dashboard's main pages (overview, sessions, retained, MQTT client)
at 1280x800 into docs/images/dashboard-*.png, from a real broker with real traffic.

Runs `mqttq serve` (embedded, in a temporary data dir, every port free, the sampler at one
sample a second), adds an admin user with `mqttq admin-user add`, starts a few MQTT clients
(paho-mqtt) that publish for the charts, leave retained messages and persistent sessions,
then logs in with Debian's chromium through Playwright and takes the pictures.

    .venv/bin/python scripts/dashboard-screenshots.py [--seconds 40] [--dark]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
PASSWORD = "screenshots-password"
TOKEN = "screenshots-token-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mqttq(*args: str) -> list[str]:
    return [sys.executable, "-m", "mqttq", *args]


def wait_for_admin(data_dir: Path, deadline: float) -> str:
    discovery = data_dir / "admin.json"
    while time.monotonic() < deadline:
        if discovery.exists():
            try:
                return str(json.loads(discovery.read_text())["url"])
            except (ValueError, KeyError):
                pass
        time.sleep(0.1)
    raise SystemExit("mqttq: error: the broker did not start; see its stderr above")


def traffic(mqtt_port: int, stop: threading.Event) -> list[Any]:
    """Sensors publishing at varying rates, two persistent subscribers, retained states."""
    import paho.mqtt.client as paho  # noqa: PLC0415 (the tests' extra)
    from paho.mqtt.packettypes import PacketTypes  # noqa: PLC0415
    from paho.mqtt.properties import Properties  # noqa: PLC0415

    clients: list[Any] = []

    def client(client_id: str, clean: bool = True) -> Any:
        made = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5
        )
        properties = None
        if not clean:  # a persistent session: it outlives the connection for an hour
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = 3600
        made.connect("127.0.0.1", mqtt_port, clean_start=clean, properties=properties)
        made.loop_start()
        clients.append(made)
        return made

    dashboards = client("ops-dashboard")
    dashboards.subscribe("sensors/#", qos=1)
    archive = client("archiver", clean=False)
    archive.subscribe("sensors/+/temp", qos=1)
    for room in ("kitchen", "hall", "garage", "attic"):
        state = json.dumps({"room": room, "online": True, "fw": "2.4.1"})
        dashboards.publish(f"status/{room}", state, qos=1, retain=True)
    dashboards.publish("config/site", b"\x01\x02binary-config\xff", qos=1, retain=True)
    sensors = {room: client(f"sensor-{room}") for room in ("kitchen", "hall", "garage", "attic")}

    def run() -> None:
        while not stop.is_set():
            burst = 5 + int(8 * random.random())
            for room, sensor in sensors.items():
                for _ in range(burst):
                    reading = f"{20 + random.random() * 5:.2f}"
                    sensor.publish(f"sensors/{room}/temp", reading, qos=1)
            stop.wait(0.1)

    threading.Thread(target=run, daemon=True).start()
    # Gone offline: its persistent session queues what its subscription matches.
    offline = client("fleet-archiver", clean=False)
    offline.subscribe("sensors/+/temp", qos=1)
    offline.disconnect()
    offline.loop_stop()
    clients.remove(offline)
    return clients


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="traffic before the pictures")
    parser.add_argument("--dark", action="store_true", help="dark theme")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        print("mqttq: error: chromium is not installed; apt-get install chromium", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mqttq-shots-") as tmp:
        work = Path(tmp)
        data_dir = work / "data"
        mqtt_port, ws_port, admin_port = free_port(), free_port(), free_port()
        config = work / "broker.toml"
        config.write_text(
            f'[admin]\nport = {admin_port}\ntoken = "{TOKEN}"\nsample_interval = 1.0\n'
            f"[listener.ws]\nport = {ws_port}\n"
        )
        env = {**os.environ, "MQTTQ_ADMIN_PASSWORD": PASSWORD}
        common = ["--config", str(config), "--data-dir", str(data_dir)]
        subprocess.run(
            mqttq("admin-user", "add", "operator", "--role", "admin", *common),
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        broker = subprocess.Popen(mqttq("serve", "--port", str(mqtt_port), *common), env=env)
        stop = threading.Event()
        clients: list[Any] = []
        try:
            url = wait_for_admin(data_dir, time.monotonic() + 30)
            clients = traffic(mqtt_port, stop)
            time.sleep(args.seconds)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium, args=["--no-sandbox"]
                )
                context = browser.new_context(
                    viewport={"width": 1280, "height": 800},
                    color_scheme="dark" if args.dark else "light",
                )
                page = context.new_page()
                page.goto(url + "/")
                page.fill("input[name=username]", "operator")
                page.fill("input[name=password]", PASSWORD)
                page.click("button[type=submit]")
                page.get_by_test_id("whoami").wait_for()
                page.get_by_test_id("chart-messages").locator("canvas").wait_for()
                page.wait_for_timeout(1500)
                page.screenshot(path=str(IMAGES / "dashboard-overview.png"))

                page.goto(url + "/#/sessions")
                page.get_by_test_id("session-link").first.wait_for()
                page.screenshot(path=str(IMAGES / "dashboard-sessions.png"))

                page.goto(url + "/#/retained")
                page.get_by_test_id("retained-payload").first.wait_for()
                page.screenshot(path=str(IMAGES / "dashboard-retained.png"))

                page.goto(url + "/#/mqtt")
                page.get_by_test_id("mqtt-url").fill(f"ws://127.0.0.1:{ws_port}/mqtt")
                page.get_by_test_id("mqtt-client-id").fill("dashboard-demo")
                page.get_by_test_id("mqtt-connect").click()
                page.locator("[data-testid=mqtt-state]:text-is('connected')").wait_for()
                page.get_by_test_id("mqtt-sub-filter").fill("sensors/kitchen/#")
                page.get_by_test_id("mqtt-subscribe").click()
                page.get_by_test_id("mqtt-message").nth(3).wait_for()
                page.screenshot(path=str(IMAGES / "dashboard-mqtt-client.png"))
                browser.close()
        finally:
            stop.set()
            for made in clients:
                made.loop_stop()
                made.disconnect()
            broker.terminate()
            broker.wait(timeout=30)
    for name in ("overview", "sessions", "retained", "mqtt-client"):
        print(IMAGES / f"dashboard-{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
