"""What a pass works with, on a floor below the builders it shares (rewriting/): the compile's options
(`options`), the kernel's facts (`facts`), the context and decision log (`context`), the schedule as data
(`schedule`), the record that declares a pass (`record`), the lowering that replays a schedule (`lowering`)
and the instruments run around each pass (`instruments`)."""
