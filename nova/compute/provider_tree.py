"""An in-memory copy of one compute node's resource provider tree.

The resource tracker and the PCI placement translator edit this tree; the
report client then makes Placement match it. Providers are addressed by
name or UUID, both unique within the tree.
"""

import dataclasses
import uuid as uuidlib


@dataclasses.dataclass
class ProviderData:
    """One provider as nova wants it in Placement."""

    uuid: str
    name: str
    parent_uuid: str | None
    inventory: dict[str, dict] = dataclasses.field(default_factory=dict)
    traits: set[str] = dataclasses.field(default_factory=set)
    # Placement's generation when last read; None for a provider not yet
    # created there.
    generation: int | None = None


class ProviderTree:
    """Providers of one compute node: a single root and its descendants."""

    def __init__(self) -> None:
        self._by_uuid: dict[str, ProviderData] = {}
        self._uuid_by_name: dict[str, str] = {}

    # Lookup ----------------------------------------------------------------

    def _find(self, name_or_uuid: str) -> ProviderData:
        uuid = self._uuid_by_name.get(name_or_uuid, name_or_uuid)
        try:
            return self._by_uuid[uuid]
        except KeyError:
            raise KeyError('No resource provider %r in the tree' %
                           name_or_uuid) from None

    def exists(self, name_or_uuid: str) -> bool:
        return (name_or_uuid in self._uuid_by_name or
                name_or_uuid in self._by_uuid)

    def data(self, name_or_uuid: str) -> ProviderData:
        """Return the provider named or identified by ``name_or_uuid``."""
        return self._find(name_or_uuid)

    def roots(self) -> list[ProviderData]:
        return [p for p in self._by_uuid.values() if p.parent_uuid is None]

    def children(self, name_or_uuid: str) -> list[ProviderData]:
        parent = self._find(name_or_uuid).uuid
        return [p for p in self._by_uuid.values() if p.parent_uuid == parent]

    def providers(self) -> list[ProviderData]:
        """All providers, every parent before its children."""
        ordered: list[ProviderData] = []
        pending = sorted(self.roots(), key=lambda p: p.name)
        while pending:
            provider = pending.pop(0)
            ordered.append(provider)
            pending.extend(sorted(self.children(provider.uuid),
                                  key=lambda p: p.name))
        return ordered

    def subtree(self, name_or_uuid: str) -> list[ProviderData]:
        """The provider and its descendants, parents first."""
        top = self._find(name_or_uuid)
        ordered = [top]
        for provider in ordered:
            ordered.extend(sorted(self.children(provider.uuid),
                                  key=lambda p: p.name))
        return ordered

    # Changes ---------------------------------------------------------------

    def add(self, name: str, parent: str | None = None,
            uuid: str | None = None, generation: int | None = None
            ) -> ProviderData:
        """Add a provider under ``parent`` (a name or UUID; None for root).

        Nova generates the UUID of a provider it creates, so that a reshape
        can name providers that do not exist in Placement yet.
        """
        if name in self._uuid_by_name:
            raise ValueError('Resource provider %r already exists' % name)
        parent_uuid = self._find(parent).uuid if parent is not None else None
        provider = ProviderData(uuid=uuid or str(uuidlib.uuid4()), name=name,
                                parent_uuid=parent_uuid,
                                generation=generation)
        if provider.uuid in self._by_uuid:
            raise ValueError('Resource provider %s already exists' %
                             provider.uuid)
        self._by_uuid[provider.uuid] = provider
        self._uuid_by_name[name] = provider.uuid
        return provider

    def remove(self, name_or_uuid: str) -> None:
        """Remove a provider and all its descendants."""
        for provider in self.subtree(name_or_uuid):
            del self._by_uuid[provider.uuid]
            del self._uuid_by_name[provider.name]

    def reparent(self, name_or_uuid: str, new_parent: str) -> None:
        """Move a provider (with its subtree) under ``new_parent``."""
        provider = self._find(name_or_uuid)
        target = self._find(new_parent)
        if any(p.uuid == target.uuid for p in self.subtree(provider.uuid)):
            raise ValueError('Cannot move %s under its own descendant %s' %
                             (provider.name, target.name))
        provider.parent_uuid = target.uuid

    def update_inventory(self, name_or_uuid: str,
                         inventory: dict[str, dict]) -> None:
        self._find(name_or_uuid).inventory = {
            rc: dict(record) for rc, record in inventory.items()}

    def update_traits(self, name_or_uuid: str, traits: set[str]) -> None:
        self._find(name_or_uuid).traits = set(traits)

    def copy(self) -> 'ProviderTree':
        """A deep copy, so a caller can compute changes and compare."""
        clone = ProviderTree()
        for provider in self.providers():
            clone._by_uuid[provider.uuid] = dataclasses.replace(
                provider, inventory={rc: dict(rec) for rc, rec in
                                     provider.inventory.items()},
                traits=set(provider.traits))
            clone._uuid_by_name[provider.name] = provider.uuid
        return clone
