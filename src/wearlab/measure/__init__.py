"""Measurements: bytes on the wire per connection phase (`phases`), curl run-time metrics (`curl`)."""
