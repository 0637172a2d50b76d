"""Local mode: ``distgnn run`` runs a DistGNNJob's pods as processes on this machine.

The pods come from the operator's own builders; :mod:`.launch_plan` turns each pod
template into a process (env, volumes mapped to a local directory, peer names mapped to
loopback ports), :mod:`.supervisor` runs and stops them, :mod:`.progress_view` draws
their progress lines, and :mod:`.runner` puts the phases together.
"""
