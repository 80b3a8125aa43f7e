"""An app's rules found in its rules package: adding a rule is adding its module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from shared.keyed.rules.rule import KeyRule, Rule


def rules_in(package: str) -> tuple[Rule, ...]:
    """One instance of every :class:`Rule` subclass defined in the modules of ``package``
    (not imported ones), in module-name order, then in order of definition."""
    found: list[Rule] = []
    for module_info in sorted(pkgutil.iter_modules(importlib.import_module(package).__path__),
                              key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{module_info.name}")
        classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, Rule) and c not in (Rule, KeyRule)
                   and c.__module__ == module.__name__]
        found += [c() for c in sorted(classes, key=lambda c: inspect.getsourcelines(c)[1])]
    return tuple(found)
