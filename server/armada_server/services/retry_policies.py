"""RetryPolicyService: retry policies as named resources."""

from __future__ import annotations

from google.protobuf import empty_pb2

from armada_core.api import submit_pb2, submit_pb2_grpc
from armada_server.errors import InvalidArgument
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc

MAX_NAME = 253  # the column's length (storage/schema.py)


def check_policy(policy: submit_pb2.RetryPolicy) -> submit_pb2.RetryPolicy:
    if not policy.name:
        raise InvalidArgument("name: a retry policy needs a name")
    if "\x00" in policy.name or len(policy.name) > MAX_NAME:
        raise InvalidArgument(f"name: at most {MAX_NAME} characters and no NUL characters")
    return policy


class RetryPolicyService(submit_pb2_grpc.RetryPolicyServiceServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @rpc
    async def CreateRetryPolicy(
        self, request: submit_pb2.RetryPolicy, context: RpcContext
    ) -> empty_pb2.Empty:
        self.ctx.require_admin("create retry policies")
        await self.ctx.run(self.ctx.retry_policies.create_retry_policy, check_policy(request))
        return empty_pb2.Empty()

    @rpc
    async def UpdateRetryPolicy(
        self, request: submit_pb2.RetryPolicy, context: RpcContext
    ) -> empty_pb2.Empty:
        self.ctx.require_admin("update retry policies")
        await self.ctx.run(self.ctx.retry_policies.update_retry_policy, check_policy(request))
        return empty_pb2.Empty()

    @rpc
    async def DeleteRetryPolicy(
        self, request: submit_pb2.RetryPolicyDeleteRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        self.ctx.require_admin("delete retry policies")
        await self.ctx.run(self.ctx.retry_policies.delete_retry_policy, request.name)
        return empty_pb2.Empty()

    @rpc
    async def GetRetryPolicy(
        self, request: submit_pb2.RetryPolicyGetRequest, context: RpcContext
    ) -> submit_pb2.RetryPolicy:
        return await self.ctx.run(self.ctx.retry_policies.get_retry_policy, request.name)

    @rpc
    async def GetRetryPolicies(
        self, request: submit_pb2.RetryPolicyListRequest, context: RpcContext
    ) -> submit_pb2.RetryPolicyList:
        policies = await self.ctx.run(self.ctx.retry_policies.list_retry_policies)
        return submit_pb2.RetryPolicyList(retry_policies=policies)
