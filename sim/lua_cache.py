"""fakeredis compiles a script's text at every EVAL (lupa's ``execute``): about 0.6 ms for one of
docllm's scripts (lib.lua is prepended to each), most of what a simulated Redis call costs and a
third of a simulation's run. Real Redis compiles a script once and keeps it by its SHA1; ``install``
has fakeredis do the same, for the simulation and the tests.

It wraps the server's Lua runtime in ``Compiled``: ``execute(text)`` runs the function compiled the
first time that text came, everything else goes to the runtime. Without the private method it
wraps (another fakeredis), nothing changes but the speed; tests/unit/test_lua_cache.py says so.
"""

from __future__ import annotations

from typing import Any

from fakeredis.commands_mixins import scripting_mixin


class Compiled:
    def __init__(self, runtime: Any):
        self.runtime = runtime
        self.functions: dict[bytes | str, Any] = {}
        self.compiles = 0

    def execute(self, text: bytes | str) -> Any:
        function = self.functions.get(text)
        if function is None:
            function = self.functions[text] = self.runtime.compile(text)
            self.compiles += 1
        return function()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)


def install() -> bool:
    """Have every fakeredis server compile each script once; False when this fakeredis has no
    such method to wrap (it then compiles at every call, as before)."""
    mixin: Any = getattr(scripting_mixin, "ScriptingCommandsMixin", None)
    plain = getattr(mixin, "_get_server_runtime", None)
    if plain is None:
        return False
    if getattr(plain, "compiles_once", False):
        return True

    def runtime(self: Any, server: Any) -> Any:
        lua = plain(self, server)
        wrapped = getattr(server, "_docllm_compiled", None)
        if wrapped is None or wrapped.runtime is not lua:
            wrapped = server._docllm_compiled = Compiled(lua)
        return wrapped

    runtime.compiles_once = True  # type: ignore[attr-defined]
    mixin._get_server_runtime = runtime
    return True
