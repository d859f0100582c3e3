"""Units API: the inventory service for real-estate units."""

__version__ = "0.1.0"
