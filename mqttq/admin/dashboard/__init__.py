"""The operator's dashboard served by the admin HTTP server: login, browser sessions and
CSRF (login.py, session.py), the sampler's history endpoint (history.py), and the page's
static files (static/). CONTRACT.md says what the page may rely on."""

from __future__ import annotations
