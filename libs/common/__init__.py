"""Shared platform library: settings, events and bus, database, Redis, HTTP, auth and observability.

Nothing in this package reads settings or opens a connection at import time; every resource is
created by an explicit factory, usually from a service's composition root (``services/<name>/app.py``).
"""
