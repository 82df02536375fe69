"""An in-memory copy of one compute node's resource provider tree.

The resource tracker and the PCI placement translator edit this tree; the
report client then makes Placement match it. Providers are addressed by
name or UUID, both unique within the tree.

Every accessor hands out a copy (a frozen :class:`ProviderData` with its
own inventory dict), never the tree's record: a change goes through one
of the tree's operations (``update_inventory``, ``update_traits``,
``update_generation``, ``reparent``, ``rename``), which keeps the name
index and the parent links consistent.
"""

import dataclasses
import uuid as uuidlib


@dataclasses.dataclass(frozen=True)
class ProviderData:
    """A snapshot of one provider as nova wants it in Placement."""

    uuid: str
    name: str
    parent_uuid: str | None
    inventory: dict[str, dict] = dataclasses.field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    # Placement's generation when last read; None for a provider not yet
    # created there.
    generation: int | None = None


def _snapshot(record: ProviderData) -> ProviderData:
    """A copy of ``record`` whose inventory the caller may change freely
    (the traits are a frozenset, so they need no copy)."""
    return dataclasses.replace(record, inventory={
        rc: dict(fields) for rc, fields in record.inventory.items()})


class ProviderTree:
    """Providers of one compute node: a single root and its descendants.

    The records kept here are never handed out and never changed in
    place; an operation replaces a provider's record with a new one.
    """

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

    def _children(self, parent_uuid: str) -> list[ProviderData]:
        return sorted((p for p in self._by_uuid.values()
                       if p.parent_uuid == parent_uuid),
                      key=lambda p: p.name)

    def _subtree(self, top: ProviderData) -> list[ProviderData]:
        ordered = [top]
        for provider in ordered:
            ordered.extend(self._children(provider.uuid))
        return ordered

    def exists(self, name_or_uuid: str) -> bool:
        return (name_or_uuid in self._uuid_by_name or
                name_or_uuid in self._by_uuid)

    def data(self, name_or_uuid: str) -> ProviderData:
        """A copy of the provider named or identified by ``name_or_uuid``.

        Raises KeyError if the tree has no such provider.
        """
        return _snapshot(self._find(name_or_uuid))

    def roots(self) -> list[ProviderData]:
        """Copies of the providers without a parent."""
        return [_snapshot(p) for p in self._by_uuid.values()
                if p.parent_uuid is None]

    def children(self, name_or_uuid: str) -> list[ProviderData]:
        """Copies of the direct children of a provider, by name."""
        return [_snapshot(p)
                for p in self._children(self._find(name_or_uuid).uuid)]

    def providers(self) -> list[ProviderData]:
        """Copies of all providers, every parent before its children."""
        ordered: list[ProviderData] = []
        for root in sorted((p for p in self._by_uuid.values()
                            if p.parent_uuid is None), key=lambda p: p.name):
            ordered.extend(self._subtree(root))
        return [_snapshot(p) for p in ordered]

    def subtree(self, name_or_uuid: str) -> list[ProviderData]:
        """Copies of the provider and its descendants, parents first."""
        return [_snapshot(p)
                for p in self._subtree(self._find(name_or_uuid))]

    # Changes ---------------------------------------------------------------

    def _check_name_free(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError('A resource provider name must be a non-empty '
                             'string, got %r' % (name,))
        if name in self._uuid_by_name:
            raise ValueError('Resource provider name %r is already used by '
                             'provider %s' % (name, self._uuid_by_name[name]))

    def _replace(self, name_or_uuid: str, **changes) -> ProviderData:
        record = dataclasses.replace(self._find(name_or_uuid), **changes)
        self._by_uuid[record.uuid] = record
        return record

    def add(self, name: str, parent: str | None = None,
            uuid: str | None = None, generation: int | None = None
            ) -> ProviderData:
        """Add a provider under ``parent`` (a name or UUID; None for root)
        and return a copy of it.

        Nova generates the UUID of a provider it creates, so that a reshape
        can name providers that do not exist in Placement yet.
        """
        self._check_name_free(name)
        parent_uuid = self._find(parent).uuid if parent is not None else None
        provider = ProviderData(uuid=uuid or str(uuidlib.uuid4()), name=name,
                                parent_uuid=parent_uuid,
                                generation=generation)
        if provider.uuid in self._by_uuid:
            raise ValueError('Resource provider %s already exists (as %r)' %
                             (provider.uuid,
                              self._by_uuid[provider.uuid].name))
        self._by_uuid[provider.uuid] = provider
        self._uuid_by_name[name] = provider.uuid
        return _snapshot(provider)

    def remove(self, name_or_uuid: str) -> None:
        """Remove a provider and all its descendants."""
        for provider in self._subtree(self._find(name_or_uuid)):
            del self._by_uuid[provider.uuid]
            del self._uuid_by_name[provider.name]

    def reparent(self, name_or_uuid: str, new_parent: str | None) -> None:
        """Move a provider (with its subtree) under ``new_parent`` (a name
        or UUID; None makes it a root). UUID, inventory and traits stay.

        Raises ValueError if ``new_parent`` is the provider itself or one
        of its descendants, which would make a cycle.
        """
        provider = self._find(name_or_uuid)
        if new_parent is None:
            self._replace(provider.uuid, parent_uuid=None)
            return
        target = self._find(new_parent)
        if any(p.uuid == target.uuid for p in self._subtree(provider)):
            raise ValueError(
                'Cannot move resource provider %r under %r: that is %s, '
                'which would make a cycle' % (
                    provider.name, target.name,
                    'the provider itself' if target.uuid == provider.uuid
                    else 'one of its descendants'))
        self._replace(provider.uuid, parent_uuid=target.uuid)

    def rename(self, name_or_uuid: str, new_name: str) -> None:
        """Give a provider a new name; its UUID and place stay.

        Raises ValueError if another provider of the tree has that name.
        """
        provider = self._find(name_or_uuid)
        if new_name == provider.name:
            return
        self._check_name_free(new_name)
        del self._uuid_by_name[provider.name]
        self._uuid_by_name[new_name] = provider.uuid
        self._replace(provider.uuid, name=new_name)

    def update_inventory(self, name_or_uuid: str,
                         inventory: dict[str, dict]) -> None:
        """Replace a provider's inventory (resource class -> record)."""
        self._replace(name_or_uuid, inventory={
            rc: dict(record) for rc, record in inventory.items()})

    def update_traits(self, name_or_uuid: str, traits) -> None:
        """Replace a provider's traits with the names in ``traits``."""
        self._replace(name_or_uuid, traits=frozenset(traits))

    def update_generation(self, name_or_uuid: str,
                          generation: int | None) -> None:
        """Record the Placement generation a provider was last seen at."""
        self._replace(name_or_uuid, generation=generation)

    def copy(self) -> 'ProviderTree':
        """An independent copy, so a caller can compute changes and
        compare. Records are immutable, so the copy may share them."""
        clone = ProviderTree()
        clone._by_uuid = dict(self._by_uuid)
        clone._uuid_by_name = dict(self._uuid_by_name)
        return clone
