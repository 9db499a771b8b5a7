"""The in-tree plugins the predictor models, one module each, named as upstream names its folder
(pkg/scheduler/framework/plugins/…); ``registry`` lists them in the default profile's order."""
