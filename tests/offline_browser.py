"""A browser context that reaches only this machine, as a learner offline would."""

import urllib.parse


def offline_context(browser, blocked: list[str], **options):
    """A context that answers only 127.0.0.1; what else a page asks for goes to ``blocked``."""
    context = browser.new_context(**options)

    def route(route):
        if urllib.parse.urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    return context
