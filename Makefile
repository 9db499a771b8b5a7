# PreemptGuard: build and push the image, render the manifests.
#   make image                      build $(IMAGE):$(VERSION)
#   make push                       push it (after `docker login`)
#   make manifests OVERLAY=cert-manager IMAGE=registry.example/preemptguard
#   make deploy                     render and `kubectl apply` in one go
IMAGE ?= ghcr.io/preemptguard/preemptguard
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
OVERLAY ?= self-signed
DOCKER ?= docker
KUBECTL ?= kubectl

.PHONY: image push manifests deploy undeploy test

image:
	$(DOCKER) build --tag $(IMAGE):$(VERSION) .

push: image
	$(DOCKER) push $(IMAGE):$(VERSION)

# The kustomizations pin ghcr.io/preemptguard/preemptguard:<release>; IMAGE/VERSION replace it.
manifests:
	@$(KUBECTL) kustomize manifests/overlays/$(OVERLAY) \
	  | sed -E 's#ghcr\.io/preemptguard/preemptguard:[A-Za-z0-9._-]+#$(IMAGE):$(VERSION)#g'

deploy:
	@$(MAKE) --no-print-directory manifests | $(KUBECTL) apply -f -

undeploy:
	@$(MAKE) --no-print-directory manifests | $(KUBECTL) delete --ignore-not-found -f -

test:
	.venv/bin/ruff check . && .venv/bin/mypy && .venv/bin/pytest
