"""What spoolparse asks of the operating system to start, watch, contain and end a child.

One family, below everything that parses: nothing here knows a transcript.

- :mod:`.spawn`: the four ways a child starts (direct, joined, gated, with a ``preexec_fn``) and why an
  ``exec`` failed;
- :mod:`.joined`: the joined start (the forking thread steps into the child's cgroups v1 for the fork);
- :mod:`.guardian`: the process that ends our children and their cgroups when we are gone;
- :mod:`.cgroup`: a cgroup per child (memory and pids caps, the exact peak, a kill that reaches escapees);
- :mod:`.lifecycle`: how a child ends, as a sans-I/O state machine;
- :mod:`.wait`: waking when a spool grows (inotify) or time passes;
- :mod:`.proc`: reading ``/proc``, and the open-files limit.
"""
