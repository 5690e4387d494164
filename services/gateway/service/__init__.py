"""The gateway's use cases: sessions and live streams."""
