"""PreemptGuard: Priority admission re-implemented, with preemption prediction."""

__version__ = "0.2.0"
