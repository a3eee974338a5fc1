"""TLS facts wearlab's parameters and parsers share (one list of each)."""

TLS_VERSIONS = ("1.0", "1.1", "1.2", "1.3")
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256")
