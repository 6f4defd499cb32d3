"""The benchmarks of `corral bench`: the scheduling core (`core`), its workloads and the virtual-cluster case."""
