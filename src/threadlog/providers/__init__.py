"""What providers accept: profiles as data (`profiles`), the serialization boundary
(`wire`), and the rules walk over a stored history (`problems`)."""
