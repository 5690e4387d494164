"""The scheduler's stores (Postgres and Redis), the placer's lock session and the image catalog file."""
