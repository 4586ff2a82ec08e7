# sandgate itself as a Nomad service job: two replicas or more, each on a
# host of its own among the nodes whose client meta says sandgate_role =
# "gateway" (never a sandbox worker), sharing one PostgreSQL database and
# one key set, behind a load balancer that reads the "sandgate" service
# (docs/deploy.md).
#
# Nothing secret and nothing site-specific is in this file. Everything
# comes from the Nomad Variable nomad/jobs/sandgate, which this job, and
# only it, may read:
#
#   config              the serve configuration (JSON, docs/runbook.md)
#                       without listen and replica, which come from the
#                       arguments below
#   store_dsn           the PostgreSQL DSN, password included
#   nomad_token         the gateway's Nomad ACL token ("" without ACLs)
#   signing_keys        every key of the set, PEM blocks back to back
#                       (cat keys/*.pem)
#   signing_key_active  the kid that signs (cat keys/active)
#
# The config names the files the templates below render:
#   "store": {"driver": "postgres", "dsn_file": "/secrets/store.dsn"},
#   "signing_key_dir": "/secrets/keys",
#   "nomad": {"token_file": "/secrets/nomad.token", ...},
#   "data_dir": "/alloc/data"
#
#   nomad job run -var image=sandgate:1.4.0 deploy/nomad/sandgate.nomad.hcl

variable "image" {
  description = "The sandgate image (make image). Loaded on every gateway node: it is never pulled."
  type        = string
  default     = "sandgate:dev"
}

variable "replicas" {
  description = "Replicas, each on a gateway node of its own."
  type        = number
  default     = 2
}

variable "datacenters" {
  description = "Datacenters of the gateway nodes."
  type        = list(string)
  default     = ["dc1"]
}

job "sandgate" {
  type        = "service"
  datacenters = var.datacenters
  # Above the sandboxes, which run below every managed application (R1).
  priority = 80

  # Gateway nodes only: a sandbox worker never runs the gateway.
  constraint {
    attribute = "${meta.sandgate_role}"
    value     = "gateway"
  }

  group "gateway" {
    count = var.replicas

    # One replica a host: losing a host loses one replica.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    network {
      port "http" {}
    }

    # One replica at a time, each ready (/readyz) before the next goes;
    # a release that never gets ready is rolled back.
    update {
      max_parallel      = 1
      health_check      = "checks"
      min_healthy_time  = "10s"
      healthy_deadline  = "3m"
      progress_deadline = "10m"
      auto_revert       = true
    }

    restart {
      attempts = 3
      interval = "5m"
      delay    = "10s"
      mode     = "delay"
    }

    # The load balancer's backends: the replicas that answer /readyz 200
    # (the store and Nomad reachable, the bundle loaded).
    service {
      provider = "nomad"
      name     = "sandgate"
      port     = "http"

      check {
        name     = "ready"
        type     = "http"
        path     = "/readyz"
        interval = "5s"
        timeout  = "3s"
      }
    }

    task "sandgate" {
      driver = "docker"

      # SIGTERM: the replica finishes the requests in flight and gives the
      # background lease up, so another takes it at once.
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      config {
        image      = var.image
        force_pull = false
        # The node's network: the replica listens on the port Nomad gave
        # it and reaches Nomad and PostgreSQL as the node does.
        network_mode    = "host"
        readonly_rootfs = true
        security_opt    = ["no-new-privileges"]
        args = [
          "serve", "--config", "/local/config.json",
          "--listen", "0.0.0.0:${NOMAD_PORT_http}",
          "--replica", "${NOMAD_ALLOC_NAME}",
        ]
      }

      template {
        destination = "local/config.json"
        change_mode = "restart"
        splay       = "30s"
        data        = "{{ with nomadVar \"nomad/jobs/sandgate\" }}{{ .config }}{{ end }}\n"
      }

      template {
        destination = "secrets/store.dsn"
        perms       = "0400"
        uid         = 65532
        gid         = 65532
        change_mode = "restart"
        splay       = "30s"
        data        = "{{ with nomadVar \"nomad/jobs/sandgate\" }}{{ .store_dsn }}{{ end }}\n"
      }

      template {
        destination = "secrets/nomad.token"
        perms       = "0400"
        uid         = 65532
        gid         = 65532
        change_mode = "restart"
        splay       = "30s"
        data        = "{{ with nomadVar \"nomad/jobs/sandgate\" }}{{ .nomad_token }}{{ end }}\n"
      }

      # The key set: a change (a key added, activated or retired) is read
      # again on SIGHUP, without a restart (docs/runbook.md, "Rotate the
      # signing key").
      template {
        destination   = "secrets/keys/keys.pem"
        perms         = "0400"
        uid           = 65532
        gid           = 65532
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = "{{ with nomadVar \"nomad/jobs/sandgate\" }}{{ .signing_keys }}{{ end }}\n"
      }

      template {
        destination   = "secrets/keys/active"
        perms         = "0400"
        uid           = 65532
        gid           = 65532
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = "{{ with nomadVar \"nomad/jobs/sandgate\" }}{{ .signing_key_active }}{{ end }}\n"
      }

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
