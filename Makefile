# PreemptGuard: build and push the image, install it with the Helm chart, render the manifests.
#   make image                      build $(IMAGE):$(VERSION) (release/build-image; dockerd and debootstrap needed)
#   make push                       push it (after `docker login`)
#   make deploy                     helm upgrade --install with $(IMAGE):$(VERSION)
#   make chart                      print what `make deploy` would install (helm template)
#   make manifests OVERLAY=cert-manager   the kustomize rendering, with the image pinned in its kustomization
#   make chart-docs                 regenerate the values table of charts/preemptguard/README.md
IMAGE ?= ghcr.io/preemptguard/preemptguard
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
OVERLAY ?= self-signed
RELEASE ?= preemptguard
NAMESPACE ?= preemptguard
HELM_ARGS ?=
DOCKER ?= docker
KUBECTL ?= kubectl
HELM ?= helm

# The chart takes the image as values, so no manifest needs rewriting to use another registry or tag.
CHART_IMAGE = --set image.repository=$(IMAGE) --set image.tag=$(VERSION)

.PHONY: image push chart deploy undeploy manifests chart-docs test

# From Debian's packages (debootstrap + docker import), dependencies from the hashed locks: see release/build-image.
image:
	DOCKER=$(DOCKER) release/build-image --tag $(IMAGE):$(VERSION)

push: image
	$(DOCKER) push $(IMAGE):$(VERSION)

chart:
	@$(HELM) template $(RELEASE) charts/preemptguard --namespace $(NAMESPACE) $(CHART_IMAGE) $(HELM_ARGS)

deploy:
	$(HELM) upgrade --install $(RELEASE) charts/preemptguard --namespace $(NAMESPACE) --create-namespace \
	  $(CHART_IMAGE) $(HELM_ARGS)

undeploy:
	$(HELM) uninstall $(RELEASE) --namespace $(NAMESPACE)

manifests:
	@$(KUBECTL) kustomize manifests/overlays/$(OVERLAY)

chart-docs:
	python3 charts/values_table.py

test:
	.venv/bin/ruff check . && .venv/bin/mypy && .venv/bin/pytest
