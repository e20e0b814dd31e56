"""P4Runtime's action profile entities: ``ActionProfileMember``, ``ActionProfileGroup``, and the
table entries of tables with an ``implementation`` (member id, group id, or a one-shot
``action_profile_action_set``).

The rules follow the P4Runtime spec where it names a code, else PI (the P4Runtime server of
simple_switch_grpc): an unknown profile id is a malformed request (INVALID_ARGUMENT, as for
tables); a member or group that exists is ALREADY_EXISTS on INSERT, one that does not is
NOT_FOUND; deleting a member still in a group or under a table entry, or a group under an
entry, is FAILED_PRECONDITION; a weight must be positive, a member appear once per group,
and the sum of weights fit the group's ``max_size`` (else the P4Info ``max_group_size``),
RESOURCE_EXHAUSTED otherwise; a group's ``max_size`` is fixed when it is created.  A profile
is programmed either with members and groups or one shot, not both at once (PI's rule).

A one-shot entry gets hidden members (one per unit of weight) and a hidden group, as PI
builds them on BMv2; they never show in member or group reads, and the entry reads back as
written.  Watch ports are kept and read back; they do not take members out of a group.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator
from typing import Protocol

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from ..executor.profiles import ActionProfile, IndirectEntry, IndirectTable, Ref
from ..executor.switch import Switch
from ..executor.tables import FieldMatch, Table, TableError
from .requests import DELETE, INSERT, MODIFY, check_default_entry, encode_int, rpc_error


class ProfilesOwner(Protocol):
    """What profile entities use of ``entities.PipelineState``, which owns them (so no import back)."""

    switch: Switch
    p4info: p4info_pb2.P4Info
    actions_by_name: dict[str, p4info_pb2.Action]

    def _match(self, table: Table, info: p4info_pb2.Table, entry: p4runtime_pb2.TableEntry) -> list[FieldMatch]: ...

    def _action(self, info: p4info_pb2.Table, ta: p4runtime_pb2.TableAction) -> tuple[str, list[int]]: ...


MANUAL, ONESHOT = "members and groups", "one-shot action sets"


class ProfileEntities:
    """The action profiles of one committed pipeline, by P4Info id."""

    def __init__(self, p: ProfilesOwner) -> None:
        self.p = p
        self.infos = {a.preamble.id: a for a in p.p4info.action_profiles}
        tables = {t.preamble.id: t for t in p.p4info.tables}
        # What a member may run: the actions of every table using the profile, but default-only ones.
        self.action_sets: dict[int, p4info_pb2.Table] = {}
        for pid, info in self.infos.items():
            refs = {r.id: r for tid in info.table_ids if tid in tables for r in tables[tid].action_refs
                    if r.scope != p4info_pb2.ActionRef.DEFAULT_ONLY}
            self.action_sets[pid] = p4info_pb2.Table(preamble=info.preamble, action_refs=refs.values())
        self.mode: dict[int, str] = {}
        self.oneshot: dict[Hashable, p4runtime_pb2.ActionProfileActionSet] = {}  # hidden group -> as written
        self._hidden = itertools.count(1)

    # ------------------------------------------------------------------ lookups
    def _profile(self, pid: int) -> tuple[ActionProfile, p4info_pb2.ActionProfile]:
        info = self.infos.get(pid)
        if info is None:
            raise rpc_error("INVALID_ARGUMENT", f"no action profile with id {pid}")
        return self.p.switch.profiles[info.preamble.name], info

    def _use(self, pid: int, mode: str) -> None:
        """PI's rule: a profile holding members or groups takes no one-shot entry, and back."""
        current = self.mode.get(pid)
        if current not in (None, mode) and not self._empty(pid, current):
            raise rpc_error("INVALID_ARGUMENT", f"{self.infos[pid].preamble.name} is programmed with {current}: "
                            f"it cannot take {mode} too")
        self.mode[pid] = mode

    def _empty(self, pid: int, mode: str) -> bool:
        prof, _ = self._profile(pid)
        hidden = [isinstance(k, tuple) for k in [*prof.members, *prof.groups]]
        return not any(hidden) if mode == ONESHOT else all(hidden)

    def _action(self, pid: int, action: p4runtime_pb2.Action) -> tuple[str, list[int]]:
        """A member's action, checked against what the profile's tables may run."""
        return self.p._action(self.action_sets[pid], p4runtime_pb2.TableAction(action=action))

    # ------------------------------------------------------------------ members
    def write_member(self, kind: int, m: p4runtime_pb2.ActionProfileMember) -> None:
        prof, _ = self._profile(m.action_profile_id)
        self._use(m.action_profile_id, MANUAL)
        try:
            if kind == DELETE:
                prof.delete_member(m.member_id)
                return
            if not m.HasField("action"):
                raise rpc_error("INVALID_ARGUMENT", f"{prof.name}: member {m.member_id} has no action")
            action, args = self._action(m.action_profile_id, m.action)
            if kind == INSERT:
                prof.add_member(m.member_id, action, args)
            else:
                prof.modify_member(m.member_id, action, args)
        except TableError as err:
            raise rpc_error(err.code, str(err)) from None

    def read_members(self, req: p4runtime_pb2.ActionProfileMember) -> Iterator[p4runtime_pb2.ActionProfileMember]:
        for pid in self._ids(req.action_profile_id):
            prof, _ = self._profile(pid)
            for k in _visible(prof.name, prof.members, req.member_id, "member"):
                member = prof.members[k]
                msg = p4runtime_pb2.ActionProfileMember(action_profile_id=pid, member_id=k)
                self._fill_action(msg.action, member.action, member.args)
                yield msg

    # ------------------------------------------------------------------ groups
    def write_group(self, kind: int, g: p4runtime_pb2.ActionProfileGroup) -> None:
        prof, info = self._profile(g.action_profile_id)
        self._use(g.action_profile_id, MANUAL)
        try:
            if kind == DELETE:
                prof.delete_group(g.group_id)
                return
            if g.max_size < 0:
                raise rpc_error("INVALID_ARGUMENT", f"{prof.name}: group max_size {g.max_size} is negative")
            if info.max_group_size and g.max_size > info.max_group_size:
                raise rpc_error("INVALID_ARGUMENT", f"{prof.name}: group max_size {g.max_size} exceeds the "
                                f"profile's max_group_size {info.max_group_size}")
            if kind == INSERT:
                if g.group_id in prof.groups:
                    raise TableError("ALREADY_EXISTS", f"{prof.name}: group {g.group_id} exists")
                max_size = g.max_size
            else:
                group = prof.groups.get(g.group_id)
                if group is None:
                    raise TableError("NOT_FOUND", f"{prof.name}: no group {g.group_id}")
                if g.max_size and g.max_size != group.max_size:
                    raise rpc_error("INVALID_ARGUMENT", f"{prof.name}: group {g.group_id}'s max_size is "
                                    f"{group.max_size}; it cannot change")
                max_size = group.max_size
            weights, watch = self._members(prof, info, g, max_size)
            if kind == INSERT:
                prof.add_group(g.group_id, max_size)
            prof.set_group(g.group_id, weights, watch)
        except TableError as err:
            raise rpc_error(err.code, str(err)) from None

    def _members(self, prof: ActionProfile, info: p4info_pb2.ActionProfile, g: p4runtime_pb2.ActionProfileGroup,
                 max_size: int) -> tuple[dict[Hashable, int], dict[Hashable, tuple[str, object]]]:
        weights: dict[Hashable, int] = {}
        watch: dict[Hashable, tuple[str, object]] = {}
        for m in g.members:
            if m.weight <= 0:
                raise rpc_error("INVALID_ARGUMENT", f"{prof.name}: member {m.member_id} has weight {m.weight} "
                                "(must be positive)")
            if m.member_id in weights:
                raise rpc_error("INVALID_ARGUMENT", f"{prof.name}: member {m.member_id} is twice in group "
                                f"{g.group_id} (use its weight)")
            if m.member_id not in prof.members:
                raise rpc_error("NOT_FOUND", f"{prof.name}: no member {m.member_id}")
            weights[m.member_id] = m.weight
            if (which := m.WhichOneof("watch_kind")) is not None:
                watch[m.member_id] = (which, getattr(m, which))
        limit = max_size or info.max_group_size
        if limit and sum(weights.values()) > limit:
            raise rpc_error("RESOURCE_EXHAUSTED", f"{prof.name}: group {g.group_id}'s weights add up to "
                            f"{sum(weights.values())}, more than {limit}")
        return weights, watch

    def read_groups(self, req: p4runtime_pb2.ActionProfileGroup) -> Iterator[p4runtime_pb2.ActionProfileGroup]:
        for pid in self._ids(req.action_profile_id):
            prof, _ = self._profile(pid)
            for k in _visible(prof.name, prof.groups, req.group_id, "group"):
                group = prof.groups[k]
                msg = p4runtime_pb2.ActionProfileGroup(action_profile_id=pid, group_id=k, max_size=group.max_size)
                for mid in sorted(group.weights):
                    member = msg.members.add(member_id=mid, weight=group.weights[mid])
                    if mid in group.watch:
                        which, value = group.watch[mid]
                        setattr(member, which, value)
                yield msg

    def _ids(self, pid: int) -> list[int]:
        if pid:
            self._profile(pid)
            return [pid]
        return list(self.infos)

    # ------------------------------------------------------------------ table entries
    def write_table_entry(self, kind: int, table: IndirectTable, info: p4info_pb2.Table,
                          entry: p4runtime_pb2.TableEntry) -> None:
        """A table entry of a table with an implementation (entities.write_table_entry's other half)."""
        pid = info.implementation_id
        try:
            if entry.is_default_action:
                check_default_entry(kind, table, entry)
                if not entry.HasField("action"):
                    self._release(table.default_ref, table)
                    return
                if entry.action.WhichOneof("type") == "action_profile_action_set":
                    raise rpc_error("UNIMPLEMENTED", f"{table.name}: a one-shot default action is not supported "
                                    "(as on BMv2)")
                old = table.default_ref
                table.set_default_ref(self._ref(pid, table, entry.action))
                self._forget(old)
                return
            match = self.p._match(table, info, entry)
            old_entry = table.find(match, entry.priority)
            old = old_entry.ref if isinstance(old_entry, IndirectEntry) else None
            if kind == DELETE:
                table.delete(match, entry.priority)
                self._forget(old)
                return
            for resource in ("counter_data", "meter_config"):
                if entry.HasField(resource):
                    raise rpc_error("INVALID_ARGUMENT", f"{table.name} has no direct {resource.split('_')[0]}")
            if kind == MODIFY and old_entry is None:
                raise TableError("NOT_FOUND", f"{table.name}: no such entry")
            if kind == INSERT and old_entry is not None:
                raise TableError("ALREADY_EXISTS", f"{table.name}: an entry with this match already exists")
            ref = self._ref(pid, table, entry.action)
            try:
                if kind == INSERT:
                    table.add_ref(match, ref, entry.priority)
                else:
                    table.modify_ref(match, ref, entry.priority)
            except TableError:
                self._forget(ref)
                raise
            self._forget(old)
        except TableError as err:
            raise rpc_error(err.code, str(err)) from None

    def _ref(self, pid: int, table: IndirectTable, ta: p4runtime_pb2.TableAction) -> Ref:
        kind = ta.WhichOneof("type")
        if kind == "action_profile_member_id":
            self._use(pid, MANUAL)
            return ("member", ta.action_profile_member_id)
        if kind == "action_profile_group_id":
            self._use(pid, MANUAL)
            return ("group", ta.action_profile_group_id)
        if kind == "action_profile_action_set":
            self._use(pid, ONESHOT)
            return self._one_shot(pid, table, ta.action_profile_action_set)
        raise rpc_error("INVALID_ARGUMENT", f"{table.name} has an action profile: an entry names a member, a group "
                        "or an action set" + ("" if kind else " (none given)"))

    def _one_shot(self, pid: int, table: IndirectTable, action_set: p4runtime_pb2.ActionProfileActionSet) -> Ref:
        """The hidden members (one per unit of weight, in order) and group of a one-shot entry."""
        prof, info = self._profile(pid)
        actions = action_set.action_profile_actions
        if not prof.with_selector:
            raise rpc_error("INVALID_ARGUMENT", f"{prof.name} has no selector: a one-shot action set needs one")
        if not actions:
            raise rpc_error("UNIMPLEMENTED", f"{table.name}: an empty action set (PI has no empty one-shot groups)")
        decoded = []
        for a in actions:
            if a.weight <= 0:
                raise rpc_error("INVALID_ARGUMENT", f"{table.name}: an action set weight must be positive, got "
                                f"{a.weight}")
            decoded.append((*self._action(pid, a.action), a.weight))
        total = sum(w for _, _, w in decoded)
        if info.max_group_size and total > info.max_group_size:
            raise rpc_error("RESOURCE_EXHAUSTED", f"{table.name}: the action set's weights add up to {total}, more "
                            f"than max_group_size {info.max_group_size}")
        members: list[Hashable] = []
        try:
            for action, args, weight in decoded:
                for _ in range(weight):
                    key = ("oneshot", next(self._hidden))
                    prof.add_member(key, action, args)
                    members.append(key)
            group = ("oneshot", next(self._hidden))
            prof.add_group(group)
            prof.set_group(group, dict.fromkeys(members, 1))
        except TableError:
            for key in members:
                prof.delete_member(key)
            raise
        self.oneshot[group] = p4runtime_pb2.ActionProfileActionSet()
        self.oneshot[group].CopyFrom(action_set)
        return ("group", group)

    def _release(self, ref: Ref | None, table: IndirectTable) -> None:
        """Reset a table's default member or group."""
        table.reset_default()
        self._forget(ref)

    def _forget(self, ref: Ref | None) -> None:
        """A one-shot group no entry points to any more goes, with its hidden members."""
        if ref is None or ref[1] not in self.oneshot:
            return
        for prof in self.p.switch.profiles.values():
            group = prof.groups.get(ref[1])
            if group is not None and not prof.uses[ref]:
                prof.delete_group(ref[1])
                for key in group.weights:
                    prof.delete_member(key)
                del self.oneshot[ref[1]]
                return

    # ------------------------------------------------------------------ reading entries back
    def fill_entry_action(self, ref: Ref, msg: p4runtime_pb2.TableAction) -> None:
        """An indirect entry's action as the controller wrote it."""
        kind, key = ref
        if key in self.oneshot:
            msg.action_profile_action_set.CopyFrom(self.oneshot[key])
        elif kind == "member":
            msg.action_profile_member_id = key
        else:
            msg.action_profile_group_id = key

    def _fill_action(self, msg: p4runtime_pb2.Action, action: str, args: tuple[int, ...]) -> None:
        ainfo = self.p.actions_by_name[action]
        msg.action_id = ainfo.preamble.id
        for p, v in zip(ainfo.params, args):
            msg.params.add(param_id=p.id, value=encode_int(v))


def _visible(profile: str, objects: dict, wanted: int, what: str) -> list[int]:
    """The ids a read returns: ``wanted`` (0: all), never a one-shot entry's hidden objects (tuple keys)."""
    ids = sorted(k for k in objects if not isinstance(k, tuple))
    if not wanted:
        return ids
    if wanted not in ids:
        raise rpc_error("NOT_FOUND", f"{profile}: no {what} {wanted}")
    return [wanted]
