"""Typed records the database layer returns, one per table it serves
that way: callers read attributes a reader can look up here, not keys
of a row dict (see ``nova/pci/device.py`` for the devices' records)."""

import dataclasses
import datetime


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A user's public key, as ``/os-keypairs`` shows it."""

    id: int
    name: str
    user_id: str
    # 'ssh' or 'x509'.
    type: str
    fingerprint: str
    public_key: str
    created_at: datetime.datetime | None

    @classmethod
    def from_row(cls, row: dict) -> 'KeyPair':
        """The record of a ``key_pairs`` row (its dict)."""
        return cls(**{field.name: row[field.name]
                      for field in dataclasses.fields(cls)})
