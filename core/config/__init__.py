"""What a stack file may say: the typed model (``model``), its shape check (``shape``, ``fields``),
sweeps, the Pulumi config hand-off and the autostop rules."""
