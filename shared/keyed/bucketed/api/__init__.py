"""What an app declares and writes: the spec, the processor's base class and its
call's types, the output frame. Imports nothing else of the engine."""
