pytest_plugins = ["streamlab.grading.plugin"]
