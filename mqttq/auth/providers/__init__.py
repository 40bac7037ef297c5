"""Authentication providers tried in a configured order (`[auth] providers`): the port in
`base`, the chain in `chain`, one module per provider. A provider answers with
`mqttq.auth.identity`'s Identity or AuthRefusal; the authenticator asks the chain."""
