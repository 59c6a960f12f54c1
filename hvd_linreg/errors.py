"""The errors a user can cause and fix. A leaf: every module that raises one imports it from
here, and it imports nothing of the tool."""


class UsageError(ValueError):
    """A problem the user caused and can fix: the command line ends every rank with exit code
    2 and its message; hvd_linreg.fit raises it on every rank."""


class HostError(UsageError):
    """A usage error of this host, found before Horovod starts: only the ranks on this host
    see it and cannot tell the others, so the first rank on the host speaks for it."""


def agreed(job, build):
    """build()'s value; a UsageError it raises on any rank of the job raised on every rank
    (job.agree: one collective, which every rank reaches)."""
    error, built = None, None
    try:
        built = build()
    except UsageError as e:
        error = e
    job.agree(error)
    return built


class ConvergenceWarning(UserWarning):
    """The exact solver's iterations ended at --max_iter before converging: the fit is the
    last iterate's. A library call's warning of this class; the estimators raise
    scikit-learn's own in its place."""
