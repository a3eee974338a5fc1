"""Built-in link profiles: named, cited shaping for the links a wearable sees.

Each profile says where its numbers come from and which of them are assumptions, because results
are only as credible as the links they ran over. `forward` is the wearable/client side towards the
other side (for a link written `between: [watch, phone]`, watch -> phone).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from wearlab.model.media import Band, Medium
from wearlab.model.shape import Shape


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    medium: Medium  # what carries it (a link using the profile inherits it unless it says otherwise)
    band: Band | None = None  # a WiFi profile's band (declared here, not read from its name)
    description: str
    citation: str  # which study, which number, and what is measured vs assumed
    forward: Shape
    reverse: Shape


def _symmetric(name: str, medium: Medium, description: str, citation: str, band: Band | None = None,
               **shape) -> Profile:
    s = Shape(**shape)
    return Profile(name=name, medium=medium, band=band, description=description, citation=citation, forward=s,
                   reverse=s)


_SEED_003 = 'Zhu et al., "Understanding the Networking Performance of Wear OS" (seed 003)'

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        _symmetric(
            "bt-classic", Medium.BT,
            "Bluetooth Classic (RFCOMM) between a watch and its paired phone.",
            f"Rate 1.1 Mbit/s: {_SEED_003}, section 4 - proxy-side bufferbloat 'will always occur "
            "when the WiFi/cellular link throughput becomes higher than ~1.1Mbps', i.e. the usable "
            "BT rate measured phone->watch (LG Urbane + Nexus 5X); the same rate is assumed for "
            "watch->phone. Delay 15 ms one-way is an ASSUMPTION: the paper reports no BT RTT. BT Sniff mode "
            "(0.5-1.2 s stalls about every 5 s of receive-only traffic, section 3) is the "
            "wearable kind's `radio: bt`, not part of the profile.",
            rate_bps=1_100_000, delay_s=0.015,
        ),
        _symmetric(
            "ble", Medium.BLE,
            "Bluetooth Low Energy (GATT) between a wearable and a phone.",
            "Rate 236.7 kbit/s: Gomez, Oller, Paradells 2012, 'Overview and Evaluation of "
            "Bluetooth Low Energy: An Emerging Low-Power Wireless Technology', Sensors 12(9) - the "
            "maximum application throughput (an analytical upper bound; real links are often "
            "slower). Delay 30 ms one-way is an ASSUMPTION of about one connection interval "
            "(phones commonly use 30-50 ms); it is not a number from that paper.",
            rate_bps=236_700, delay_s=0.030,
        ),
        _symmetric(
            "wifi-2g4-good", Medium.WIFI,
            "2.4 GHz WiFi, good conditions (the only WiFi band most watches have).",
            f"{_SEED_003}, section 5: WiFi 'good network condition (10Mbps BW, 10ms RTT)'. The "
            "10 ms RTT is split evenly as 5 ms each way; the even split is an assumption.",
            band=Band.GHZ_2_4, rate_bps=10_000_000, delay_s=0.005,
        ),
        _symmetric(
            "wifi-2g4-fair", Medium.WIFI,
            "2.4 GHz WiFi, fair conditions.",
            f"{_SEED_003}, section 5: WiFi 'fair network condition (5Mbps BW, 20ms RTT)'. The "
            "20 ms RTT is split evenly as 10 ms each way; the even split is an assumption.",
            band=Band.GHZ_2_4, rate_bps=5_000_000, delay_s=0.010,
        ),
        _symmetric(
            "wifi-5g-good", Medium.WIFI,
            "5 GHz WiFi (802.11ac) at short range, e.g. phone to access point.",
            "ASSUMPTION, not measured in the seed studies: 50 Mbit/s and 2 ms one-way are typical "
            "of 802.11ac at short range in a quiet room. Seed 003 (section 5) notes the watches "
            "it tested support only 2.4 GHz, so use this for phones, not watches.",
            band=Band.GHZ_5, rate_bps=50_000_000, delay_s=0.002,
        ),
        _symmetric(
            "wan", Medium.WIRED,
            "Broadband path from an access point to an Internet server.",
            "ASSUMPTION, not measured in the seed studies: 50 Mbit/s and 10 ms one-way stand for a "
            "typical home broadband path to a nearby data centre. Override per link as needed.",
            rate_bps=50_000_000, delay_s=0.010,
        ),
    )
}
