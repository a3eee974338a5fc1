"""Link media: what carries a link. Declared data - a profile has one, an explicit link gives one
or inherits its profile's - never inferred from a name. What depends on it: a wearable's BT radio
(Sniff mode) and its BT -> WiFi handover find their links by medium, the radio's blackouts need
the htb shaper order on a BT link, and energy per radio (device power figures per medium).
"""

from __future__ import annotations

from enum import Enum


class Medium(str, Enum):
    BT = "bt"          # Bluetooth Classic (BR/EDR): a watch's link to its phone
    BLE = "ble"        # Bluetooth Low Energy
    WIFI = "wifi"      # 802.11
    WIRED = "wired"    # the Internet side: AP to router to server

    @property
    def is_radio(self) -> bool:
        return self is not Medium.WIRED

    @property
    def is_bluetooth(self) -> bool:
        return self in (Medium.BT, Medium.BLE)


MEDIA = [m.value for m in Medium]


class Band(str, Enum):
    """A WiFi link's band (declared data: `band:` on the link or its profile, never read from a
    name). Only 2.4 GHz shares spectrum with Bluetooth (2.402-2.480 GHz): the topology's
    `interference:` rule couples a BT/BLE link with a 2.4 GHz WiFi link ending on the same node."""

    GHZ_2_4 = "2.4GHz"
    GHZ_5 = "5GHz"


BANDS = [b.value for b in Band]
