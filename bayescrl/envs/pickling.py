"""Copying and pickling envs by their constructor arguments (what gymnasium's ``EzPickle`` does for
``Ant-v5``), recorded automatically so that subclasses with their own signatures need no bookkeeping."""

from __future__ import annotations

from typing import Any


class CopyByArgs:
    """Mixin (first base): ``copy.deepcopy`` and ``pickle`` rebuild the env from the arguments it was
    constructed with, as gymnasium's ``EzPickle`` does.

    The copy is a fresh env (its own MuJoCo model or SUMO simulation, nothing shared): after
    ``reset(seed=s)`` it replays the original exactly. State inside an episode is not carried over.
    The arguments are recorded in ``__new__`` for the class actually instantiated, so a subclass such as
    ``PointCircleEnv(radius=3)`` is rebuilt with ``radius=3``, not with its base class's arguments.
    """

    _ctor_args: tuple[Any, ...]
    _ctor_kwargs: dict[str, Any]

    def __new__(cls, *args: Any, **kwargs: Any):
        obj = super().__new__(cls)
        obj._ctor_args, obj._ctor_kwargs = args, dict(kwargs)
        return obj

    def __getstate__(self) -> dict[str, Any]:
        return {"_ctor_args": self._ctor_args, "_ctor_kwargs": self._ctor_kwargs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = type(self)(*state["_ctor_args"], **state["_ctor_kwargs"])
        self.__dict__.update(fresh.__dict__)
