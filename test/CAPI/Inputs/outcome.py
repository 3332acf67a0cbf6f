"""What a call of the Python binding came to, as the CAPI tests print it."""
import gptc


def error(attempt):
    """"no error", or "GptcError: " and the first line of its message."""
    try:
        attempt()
        return "no error"
    except gptc.GptcError as e:
        return "GptcError: %s" % str(e).splitlines()[0]
