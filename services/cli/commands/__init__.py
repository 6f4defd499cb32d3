"""The commands of `corral`, one module per command or command group; `services.cli.__main__` lists them."""
