"""Webhooks: subscriptions to the change feed, delivered signed, retried, logged."""
