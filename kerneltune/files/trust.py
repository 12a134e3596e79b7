"""Whose files the tool takes as its own: a file or folder is trusted when the user running kerneltune (or root)
owns it and no one else can write it, the way git's ``safe.directory`` and ssh's ``StrictModes`` judge them.

A journal resumed, a table launched from or installed into, a build loaded, a report written: each is a file
another user could have planted or could replace if they own it or can write it or its folder. Such a file is
refused (or, where the tool only shows it, warned about) in one line naming it and why. Links are judged by
their owner too: a link another user made (say in a sticky folder such as /tmp) is never followed.

Two kinds of write access are not another user's: a folder with the sticky bit (others may add files but not
replace ours, as in /tmp), and a folder or file writable by the user's own private group (a group named after
the user, with no other member: Debian's default). ``KERNELTUNE_SAFE_FOLDERS`` lists folders (colon-separated,
``*`` for all) the user trusts whatever their owners and modes, as git's ``safe.directory`` does.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import stat
from pathlib import Path

SAFE_FOLDERS_ENV = "KERNELTUNE_SAFE_FOLDERS"


class Untrusted(PermissionError):
    """A file or folder another user owns or can write, or a link another user made: one line naming it
    (``filename``) and why (``strerror``)."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


@functools.cache
def _private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is ``uid``'s own private group: its primary group, named as the user, no other member."""
    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _safe_listed(path: Path) -> bool:
    listed = [p for p in os.environ.get(SAFE_FOLDERS_ENV, "").split(":") if p]
    if "*" in listed:
        return True
    real = os.path.realpath(path)
    return any(real == (root := os.path.realpath(p)) or real.startswith(root.rstrip("/") + "/") for p in listed)


def why_untrusted_stat(st: os.stat_result, what: str = "") -> str | None:
    """Why a file or folder with status ``st`` is not the user's own, or None: owned by another user (root is
    trusted, as the system's own folders are), or writable by a group other than the user's private one, or by
    everyone (a sticky folder excepted)."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"owned by {_user(st.st_uid)}, not by you ({_user(me)}){what}"
    folder = stat.S_ISDIR(st.st_mode)
    sticky = folder and st.st_mode & stat.S_ISVTX
    if st.st_mode & stat.S_IWOTH and not sticky:
        return f"writable by every user (mode {stat.S_IMODE(st.st_mode):o}){what}"
    if st.st_mode & stat.S_IWGRP and not sticky and not _private_group(st.st_gid, me) and st.st_gid != 0:
        try:
            name = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            name = f"gid {st.st_gid}"
        return f"writable by group {name} (mode {stat.S_IMODE(st.st_mode):o}){what}"
    return None


def why_untrusted(path: Path | str, folder_too: bool = True) -> str | None:
    """Why ``path`` may not be taken as the user's own, or None (also when nothing is there): a link another user
    made, a file or folder another user owns or can write (``why_untrusted_stat``), or, with ``folder_too``, a
    folder above it that is (another user could move it away and put their own in its place: ssh judges the
    folders above ``authorized_keys`` so). ``KERNELTUNE_SAFE_FOLDERS`` lifts the checks under the folders it
    lists."""
    path = Path(path)
    if _safe_listed(path):
        return None
    try:
        lst = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # nothing there: the caller's own open or make says what
        lst = None
    except OSError as e:
        return f"cannot be examined ({e.strerror})"
    if lst is not None and stat.S_ISLNK(lst.st_mode) and lst.st_uid not in (os.geteuid(), 0):
        return f"a link made by {_user(lst.st_uid)}, not by you; a link of another user is never followed"
    if lst is not None:
        try:
            st = os.stat(path)
        except OSError:
            st = None  # a dangling link: the caller's own open says so
        if st is not None and (why := why_untrusted_stat(st)) is not None:
            return why
    if folder_too:
        folder = Path(os.path.realpath(path)).parent
        for above in (folder, *folder.parents):
            try:
                st = os.stat(above)
            except OSError:
                continue  # a folder not made yet is the caller's to make
            if (why := why_untrusted_stat(st)) is not None:
                return f"{'its folder' if above == folder else 'a folder above it,'} {above}, is {why}"
    return None


def check_trusted(path: Path | str, folder_too: bool = True) -> None:
    """Untrusted (a PermissionError naming ``path``) if ``why_untrusted`` finds a reason."""
    if (why := why_untrusted(path, folder_too)) is not None:
        raise Untrusted(13, f"{why}; refused (the guide's page on trust says what kerneltune takes as yours, and "
                            f"{SAFE_FOLDERS_ENV} lists folders to trust whatever their owners)", str(path))


def warn_if_not_yours(path: Path | str, what: str) -> None:
    """One warning, once a process, where a file that is only read for display or replay is not the user's own
    (``why_untrusted``): report and ``--replay`` read other users' journals, as ``git log`` reads another's
    repository, but say so, since a forged record there would show as measured."""
    import logging

    from .logs import log_once

    if (why := why_untrusted(path)) is not None:
        log_once(logging.getLogger("kerneltune"), f"{what} {path} is {why}: read, but it is not your record")

