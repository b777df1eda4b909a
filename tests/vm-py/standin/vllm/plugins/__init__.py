# SPDX-License-Identifier: GPL-2.0
"""vLLM's general plugins. Models vllm 0.33.0 (vllm/plugins/
__init__.py): load_general_plugins() loads every entry point of the
group vllm.general_plugins (only those named in VLLM_PLUGINS when it is
set) and calls it, once per process; vLLM calls it in each process it
starts (EngineArgs, the worker's init_worker)."""

import vllm.envs as envs

DEFAULT_PLUGINS_GROUP = "vllm.general_plugins"

plugins_loaded = False


def load_plugins_by_group(group: str):
    from importlib.metadata import entry_points
    allowed_plugins = envs.VLLM_PLUGINS
    plugins = {}
    for plugin in entry_points(group=group):
        if allowed_plugins is None or plugin.name in allowed_plugins:
            plugins[plugin.name] = plugin.load()
    return plugins


def load_general_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    for func in load_plugins_by_group(group=DEFAULT_PLUGINS_GROUP).values():
        func()
