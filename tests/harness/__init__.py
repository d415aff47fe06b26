"""Harnesses that turn one-off fault trials into figures anyone can reproduce (issue 15)."""
