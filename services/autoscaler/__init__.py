"""The autoscaler service: grows and shrinks the cluster for pending work, one active instance under a lease."""
