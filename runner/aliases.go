package runner

import (
	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/internal/version"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/spec"
)

// The run-spec language, the submitting client and the Redis setup moved
// to packages of their own (spec, client, redisconn), so that a program
// which only submits links no worker runtime. Their old names stay here,
// as aliases, so code written against runner keeps compiling; new code
// imports the packages.

// Client names: see package client.
type (
	Client        = client.Client
	ClientConfig  = client.Config
	Submitted     = client.Submitted
	RunSummary    = client.RunSummary
	EventFollower = client.EventFollower
)

// NewClient is client.New.
func NewClient(cfg ClientConfig) (*Client, error) { return client.New(cfg) }

// DefaultFollowWait is client.DefaultFollowWait.
const DefaultFollowWait = client.DefaultFollowWait

// Run-spec names: see package spec.
type (
	RunSpec     = spec.Run
	NodeSpec    = spec.Node
	SpecError   = spec.Error
	SpecFormat  = spec.Format
	Limits      = spec.Limits
	Duration    = spec.Duration
	Notify      = spec.Notify
	RetryPolicy = spec.RetryPolicy
)

// Spec formats: see spec.Format.
const (
	SpecAuto = spec.Auto
	SpecJSON = spec.JSON
	SpecYAML = spec.YAML
)

// ErrInvalidSpec is spec.ErrInvalid.
var ErrInvalidSpec = spec.ErrInvalid

// MaxNotifyURLBytes is spec.MaxNotifyURLBytes.
const MaxNotifyURLBytes = spec.MaxNotifyURLBytes

// ParseSpec is spec.Parse.
func ParseSpec(data []byte) (*RunSpec, error) { return spec.Parse(data) }

// ParseSpecAs is spec.ParseAs.
func ParseSpecAs(data []byte, format SpecFormat) (*RunSpec, error) { return spec.ParseAs(data, format) }

// SpecFormatOf is spec.FormatOf.
func SpecFormatOf(nameOrType string) SpecFormat { return spec.FormatOf(nameOrType) }

// ResolveRefs is spec.ResolveRefs.
var ResolveRefs = spec.ResolveRefs

// Redis setup names: see package redisconn.
type RedisConfig = redisconn.Config

// DefaultRedisURL is redisconn.DefaultURL.
const DefaultRedisURL = redisconn.DefaultURL

// OpenRedis is redisconn.OpenURL.
var OpenRedis = redisconn.OpenURL

// Delivery names: how a node's task is put on Asynq.
const (
	TaskType     = delivery.TaskType
	DefaultQueue = delivery.DefaultQueue
)

// TaskID is delivery.TaskID: "run:node:attempt", so a second enqueue of
// one attempt is refused by Asynq instead of stacking a duplicate.
var TaskID = delivery.TaskID

// Version is the build's version (internal/version): the module version,
// else "(devel)" and the commit when recorded.
func Version() string { return version.String() }
