"""One module per placement rule, each registering its filters and scorers in the framework's registry (pure).

Importing this package imports every module in it, so adding a rule means adding one module.
"""

from importlib import import_module
from pkgutil import iter_modules

for _module in iter_modules(__path__):
    import_module(f"{__name__}.{_module.name}")
