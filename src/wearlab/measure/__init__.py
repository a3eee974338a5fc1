"""Measurements: bytes on the wire per connection phase (`phases`, reading `pcap` files, `tcp`
connections and their `tls` records), curl run-time metrics (`curl`)."""
