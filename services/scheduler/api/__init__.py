"""The scheduler's HTTP routes, request and response bodies, and the domain-error map."""
