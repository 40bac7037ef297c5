"""Authentication providers tried in a configured order (`[auth] providers`): the port in
`base`, the chain in `chain`, one module per provider."""
