"""The webhook server: Flask app, bounded bodies, gunicorn workers, TLS, the health port, metrics."""
