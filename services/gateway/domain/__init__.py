"""Pure rules of the gateway: sessions, CSRF, header filtering, SSE framing and the resume buffer."""
