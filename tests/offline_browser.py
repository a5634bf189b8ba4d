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


#: The rules the widgets are held to: WCAG 2.1, levels A and AA (axe-core's tags).
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def accessibility_violations(page, selector: str) -> list[str]:
    """What axe-core (bundled, offline) finds against WCAG 2.1 A and AA inside ``selector``:
    one line per rule and element, empty when the widget passes."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(
        page,
        context={"include": [[selector]]},
        options={"runOnly": {"type": "tag", "values": WCAG}, "resultTypes": ["violations"]},
    )
    return [
        f"{violation['id']} ({violation['impact']}): {', '.join(node['target'])}: "
        f"{node.get('failureSummary', '').splitlines()[-1].strip()}"
        for violation in results.response["violations"]
        for node in violation["nodes"]
    ]
