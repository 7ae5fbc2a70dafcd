"""Request and response models, one module per routes module and named like it
(`app.http.routes.sessions` takes its bodies from `app.http.models.sessions`); what they share
(body policies, integer bounds, enum documentation) is in `common`."""
