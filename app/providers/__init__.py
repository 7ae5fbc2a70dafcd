"""Model providers: the only code that talks to model APIs."""
