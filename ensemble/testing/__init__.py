"""A simulated OpenAI-compatible expert server (real HTTP on 127.0.0.1) for tests and users."""
